//! Content-addressed blobs: `PUT` and `GET /v1/blobs/{digest}`, the bytes a subject names by
//! raw digest, kept by the engine's `put_blob` and read through its `blob` (who may read what
//! is the engine's rule). A stored blob is served as an attachment, never as a page: its media
//! type is the one it was put with, and `nosniff` and a sandboxing policy keep a browser from
//! reading it as anything else.

use crate::AppState;
use crate::auth::Caller;
use crate::problem::{ApiError, Problem};
use crate::routes::Segment;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;
use verdict_engine::BlobInfo;

/// A stored blob's record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlobOut {
    /// The raw digest of the bytes (`sha256:` and 64 lowercase hex digits).
    #[schema(value_type = String)]
    pub digest: Digest,
    /// Their length in bytes.
    pub size: u64,
    /// The media type they were first put with, if any.
    pub media_type: Option<String>,
    /// The principal that put them first.
    pub writer: String,
    /// When, on the store's clock.
    #[schema(value_type = String)]
    pub stored_at: Timestamp,
}

impl From<BlobInfo> for BlobOut {
    fn from(b: BlobInfo) -> Self {
        Self {
            digest: b.digest,
            size: b.size,
            media_type: b.media_type,
            writer: b.writer,
            stored_at: b.stored_at,
        }
    }
}

/// The raw body of a put, read under the route's limit (the store's blob limit): over it is a
/// `413 payload_too_large` problem, read before the engine is asked, so nothing is written.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            crate::body::unreadable(
                &e,
                &format!(
                    "the blob is over the limit of {} bytes",
                    verdict_store::MAX_BLOB_BYTES
                ),
            )
        })?;
        Ok(Self(bytes))
    }
}

fn etag(digest: &Digest) -> HeaderMap {
    crate::etag::header(&format!("\"{}\"", digest.as_str()))
}

/// Stores the body's bytes under `digest`, which must be their raw digest (producers,
/// operators and runners). The `Content-Type` given is kept and served back.
#[utoipa::path(put, path = "/v1/blobs/{digest}", tag = "blobs",
    params(("digest" = String, Path, description = "The raw digest of the bytes: sha256: and 64 lowercase hex digits")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "The bytes, at most 8 MiB; their Content-Type is kept"),
    responses(
        (status = 201, description = "Stored", body = BlobOut,
            headers(("ETag" = String, description = "The digest, quoted"))),
        (status = 200, description = "The same bytes were stored already; their record", body = BlobOut,
            headers(("ETag" = String, description = "The digest, quoted"))),
        (status = "4XX", description = "Refused: 413 over the limit, 422 bytes that do not hash to the digest", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
    headers: HeaderMap,
    RawBody(bytes): RawBody,
) -> Result<Response, ApiError> {
    let media_type = match headers.get(header::CONTENT_TYPE) {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| {
            ApiError::request(
                StatusCode::BAD_REQUEST,
                "malformed_body",
                "the Content-Type is not visible ASCII".into(),
            )
        })?),
    };
    let put = state
        .engine
        .put_blob(&caller, &digest, &bytes, media_type)
        .await?;
    let status = if put.inserted {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let tag = etag(&put.blob.digest);
    Ok((status, tag, Json(BlobOut::from(put.blob))).into_response())
}

/// The bytes stored under `digest`, for an operator, the principal that put them, or a
/// principal whose read grant covers a subject naming the digest. Anyone else gets the same
/// `404` as for bytes that are not stored.
#[utoipa::path(get, path = "/v1/blobs/{digest}", tag = "blobs",
    params(("digest" = String, Path, description = "The raw digest of the bytes")),
    responses(
        (status = 200, description = "The bytes, as an attachment", body = Vec<u8>,
            content_type = "application/octet-stream",
            headers(
                ("ETag" = String, description = "The digest, quoted"),
                ("X-Content-Type-Options" = String, description = "nosniff"),
                ("Content-Disposition" = String, description = "attachment"),
            )),
        (status = "4XX", description = "Refused, or not stored (404 either way)", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
) -> Result<Response, ApiError> {
    let blob = state.engine.blob(&caller, &digest).await?;
    let mut headers = etag(&blob.info.digest);
    let media = blob
        .info
        .media_type
        .as_deref()
        .and_then(|m| HeaderValue::from_str(m).ok())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_TYPE, media);
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok((StatusCode::OK, headers, blob.bytes).into_response())
}
