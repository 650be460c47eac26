//! Who is calling: the bearer token of the `Authorization` header, resolved by the engine's
//! own `authenticate`. A missing, malformed or unknown token goes to the engine as it came
//! (absent or malformed as an empty token), so the refusal is recorded exactly as the engine
//! records any other: a denial of `unauthenticated` with at most a short token fingerprint.

use crate::AppState;
use crate::problem::ApiError;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use verdict_engine::Principal;

/// The authenticated principal of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
            .unwrap_or("");
        let principal = state.engine.authenticate(token).await?;
        Ok(Self(principal))
    }
}

/// The token of a `Bearer` credential (the scheme is case-insensitive, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}
