//! Who is calling: the bearer token of the `Authorization` header, resolved by the engine's
//! own `authenticate`. A missing, malformed or unknown token goes to the engine as it came
//! (absent or malformed as an empty token), so the refusal is recorded exactly as the engine
//! records any other: a denial of `unauthenticated` with at most a short token fingerprint.
//! Failed authentications are rate-limited per peer address and across all of them
//! ([`crate::limit`]).

use crate::AppState;
use crate::problem::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
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
        let Peer(peer) = Peer::of(parts);
        authenticate(state, peer, bearer_token(&parts.headers))
            .await
            .map(Self)
    }
}

/// The address of the request's TCP peer (unspecified when the server was not told it).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub IpAddr);

impl Peer {
    fn of(parts: &Parts) -> Self {
        Self(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip()),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(parts))
    }
}

/// The principal holding `token`, presented by `peer`: the one way a presented token is
/// resolved, whether it came as a bearer token, a review-page session cookie, a sign-in form
/// or is checked again under an open event stream. While `peer`'s allowance of failed
/// authentication (or the server's) is spent, a token no principal holds is refused with
/// `429` before the engine is asked, so no denial is written; otherwise the engine decides and
/// records the refusal, and the failure is charged to `peer` and to the server.
pub(crate) async fn authenticate(
    state: &AppState,
    peer: IpAddr,
    token: &str,
) -> Result<Principal, ApiError> {
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
        Ok(principal) => Ok(principal),
        Err(e) => {
            state.limiter.charge(peer);
            Err(e.into())
        }
    }
}

/// The token of the request's `Authorization: Bearer` header; empty when there is none, or
/// it is of another scheme or unreadable, so that the engine refuses and records it as it
/// records any other token no principal holds.
pub(crate) fn bearer_token(headers: &HeaderMap) -> &str {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .unwrap_or("")
}

/// The token of a `Bearer` credential (the scheme is case-insensitive, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}
