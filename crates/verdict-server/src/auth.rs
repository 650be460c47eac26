//! Who is calling: the bearer token of the `Authorization` header, resolved by the engine's
//! own `authenticate`. A missing, malformed or unknown token goes to the engine as it came
//! (absent or malformed as an empty token), so the refusal is recorded exactly as the engine
//! records any other: a denial of `unauthenticated` with at most a short token fingerprint.
//! Failed authentications are rate-limited per peer address and across all of them
//! ([`crate::limit`]).

use crate::AppState;
use crate::problem::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        if let Some(limited) = state.limiter.exhausted(peer) {
            // Only a token no principal holds is limited; looking it up writes nothing.
            if !state.engine.token_is_held(token).await? {
                return Err(ApiError::TooManyRequests {
                    retry_after: limited.wait.as_secs().max(1),
                    scope: limited.scope,
                });
            }
        }
        match state.engine.authenticate(token).await {
            Ok(principal) => Ok(Self(principal)),
            Err(e) => {
                state.limiter.charge(peer);
                Err(e.into())
            }
        }
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
