//! Entity tags of the pointer-like resources (an execution's head, the gate's policy) and the
//! `If-Match` precondition of the writes that move them. A tag names the pointer's whole
//! state (digest and generation or revision), so setting a policy back to an earlier one still
//! changes the tag. Tags are strong and compared strongly (RFC 9110 section 13.1.1).
//!
//! The tags are the engine's versions ([`verdict_engine::precondition`]), and `If-Match` is
//! handed to the engine's use case as a [`Precondition`]: the engine compares it with the state
//! its compare-and-set moves the pointer from, so no writer can slip in between the comparison
//! and the move.

use crate::problem::ApiError;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use verdict_engine::Precondition;
use verdict_store::{ExecutionHead, GateHead};

/// The tag of an execution's head.
#[must_use]
pub fn of_execution(head: &ExecutionHead) -> String {
    verdict_engine::precondition::execution_version(head)
}

/// The tag of a gate's head.
#[must_use]
pub fn of_gate(head: &GateHead) -> String {
    verdict_engine::precondition::gate_version(head)
}

/// An `ETag` header holding `tag`.
#[must_use]
pub fn header(tag: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(tag) {
        headers.insert(header::ETAG, v);
    }
    headers
}

/// The `If-Match` precondition of a request: `None` without the header; `*` matches any
/// current state, otherwise one of the listed strong tags must equal the current one. A value
/// that is not visible ASCII is a 400.
pub fn precondition(headers: &HeaderMap) -> Result<Option<Precondition>, ApiError> {
    let mut given = headers.get_all(header::IF_MATCH).iter().peekable();
    if given.peek().is_none() {
        return Ok(None);
    }
    let mut values = Vec::new();
    for v in given {
        values.push(v.to_str().map_err(|_| {
            ApiError::request(
                StatusCode::BAD_REQUEST,
                "invalid_precondition",
                "If-Match is not visible ASCII".into(),
            )
        })?);
    }
    Ok(Some(Precondition::from_if_match(values)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_MATCH,
            HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("x")),
        );
        h
    }

    fn check(headers: &HeaderMap, current: Option<&str>) -> bool {
        precondition(headers)
            .ok()
            .flatten()
            .is_none_or(|p| p.matches(current))
    }

    #[test]
    fn if_match_is_compared_strongly() {
        let cur = Some("\"a#1\"");
        assert!(precondition(&HeaderMap::new()).ok().flatten().is_none());
        assert!(check(&with("\"a#1\""), cur));
        assert!(check(&with("\"b#2\", \"a#1\""), cur));
        assert!(check(&with("*"), cur));
        for bad in ["\"a#2\"", "W/\"a#1\"", "a#1"] {
            assert!(!check(&with(bad), cur), "{bad}");
        }
        // Nothing current: even `*` fails.
        assert!(!check(&with("*"), None));
        // Not visible ASCII: a 400, not a mismatch.
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_MATCH,
            HeaderValue::from_bytes(b"\"\xe9\"").unwrap_or(HeaderValue::from_static("x")),
        );
        assert_eq!(
            precondition(&h).err().map(|e| e.classify().0),
            Some(StatusCode::BAD_REQUEST)
        );
    }
}
