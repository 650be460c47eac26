//! Entity tags of the pointer-like resources (an execution's head, the gate's policy) and the
//! `If-Match` precondition of the writes that move them. A tag names the pointer's whole
//! state (digest and generation or revision), so setting a policy back to an earlier one still
//! changes the tag. Tags are strong and compared strongly (RFC 9110 section 13.1.1).

use crate::problem::ApiError;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use verdict_store::{ExecutionHead, GateHead};

/// The tag of an execution's head.
#[must_use]
pub fn of_execution(head: &ExecutionHead) -> String {
    format!("\"{}#{}\"", head.subject_digest.as_str(), head.generation)
}

/// The tag of a gate's head.
#[must_use]
pub fn of_gate(head: &GateHead) -> String {
    format!("\"{}#{}\"", head.policy_digest.as_str(), head.revision)
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

/// Checks `If-Match` against the current tag (`None`: the pointer does not exist yet). No
/// header: no precondition. `*` matches any current state; otherwise one of the listed strong
/// tags must equal the current one. A mismatch is a 412 and nothing is written.
pub fn check_if_match(headers: &HeaderMap, current: Option<&str>) -> Result<(), ApiError> {
    let mut given = headers.get_all(header::IF_MATCH).iter().peekable();
    if given.peek().is_none() {
        return Ok(());
    }
    let mut listed = Vec::new();
    for v in given {
        let text = v.to_str().map_err(|_| {
            ApiError::request(
                StatusCode::BAD_REQUEST,
                "invalid_precondition",
                "If-Match is not visible ASCII".into(),
            )
        })?;
        listed.extend(text.split(',').map(str::trim).filter(|t| !t.is_empty()));
    }
    let matched = match current {
        None => false,
        Some(cur) => listed.iter().any(|t| *t == "*" || *t == cur),
    };
    if matched {
        return Ok(());
    }
    Err(ApiError::request(
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
        format!(
            "If-Match {} does not match the current state ({}); read it again",
            listed.join(", "),
            current.unwrap_or("none yet")
        ),
    ))
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

    #[test]
    fn if_match_is_compared_strongly() {
        let cur = Some("\"a#1\"");
        assert!(check_if_match(&HeaderMap::new(), cur).is_ok());
        assert!(check_if_match(&with("\"a#1\""), cur).is_ok());
        assert!(check_if_match(&with("\"b#2\", \"a#1\""), cur).is_ok());
        assert!(check_if_match(&with("*"), cur).is_ok());
        for bad in ["\"a#2\"", "W/\"a#1\"", "a#1"] {
            let e = check_if_match(&with(bad), cur).err();
            assert_eq!(
                e.map(|e| e.classify().0),
                Some(StatusCode::PRECONDITION_FAILED),
                "{bad}"
            );
        }
        // Nothing current: even `*` fails.
        assert!(check_if_match(&with("*"), None).is_err());
    }
}
