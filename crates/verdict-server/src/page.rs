//! Pagination of list routes: `?limit=&after=`, where `after` is the key of the last item of
//! the previous page (a principal's name, a grant id, an execution id, a run id). Keys are
//! never reused because nothing is deleted, so a cursor stays valid however long a client
//! waits. `limit` is bounded; the answer carries the link to the next page in its body
//! (`next`) and in a `Link` header, and neither when the list is exhausted.

use crate::problem::ApiError;
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;

/// Items per page when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` accepted.
pub const MAX_LIMIT: u32 = 500;

/// `?limit=&after=` of a list route.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items per page, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The key of the last item already seen; the page starts after it.
    pub after: Option<String>,
}

/// `?principal=&limit=&after=` of the grant list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GrantQuery {
    /// Only the grants of this principal (operators; anyone else may name only itself).
    pub principal: Option<String>,
    /// Items per page, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The grant id of the last grant already seen.
    pub after: Option<String>,
}

impl GrantQuery {
    /// The paging part.
    #[must_use]
    pub fn page(&self) -> PageQuery {
        PageQuery {
            limit: self.limit,
            after: self.after.clone(),
        }
    }
}

/// A query string decoded into `T`; one that does not decode is a 400 problem document.
#[derive(Debug)]
pub struct ListQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ListQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(q) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                ApiError::request(
                    StatusCode::BAD_REQUEST,
                    "invalid_query",
                    format!("the query string cannot be read: {}", e.body_text()),
                )
            })?;
        // Every value a list route reads is a name, an id or a number: one holding a control
        // character (U+0000 among them, which no store can hold) is refused before any read.
        if let Ok(Query(pairs)) = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            && let Some((name, _)) = pairs
                .iter()
                .find(|(k, v)| k.chars().chain(v.chars()).any(char::is_control))
        {
            return Err(ApiError::request(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("the query parameter {name:?} holds a control character"),
            ));
        }
        Ok(Self(q))
    }
}

/// One page of `items`, and the link to the next one.
pub struct Paged<T> {
    /// The page.
    pub items: Vec<T>,
    /// The path and query of the next page, when there is one.
    pub next: Option<String>,
}

impl<T> Paged<T> {
    /// The `Link` header of the next page.
    #[must_use]
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(next) = &self.next
            && let Ok(v) = HeaderValue::from_str(&format!("<{next}>; rel=\"next\""))
        {
            headers.insert(header::LINK, v);
        }
        headers
    }
}

/// The page of `items` that `q` asks for. `path` is the route's path and `extra` the query
/// parameters to repeat in the next link. A cursor that names no item is a 400: the client
/// holds a key this list never had.
pub fn paginate<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> &str,
    q: &PageQuery,
    path: &str,
    extra: &[(&str, &str)],
) -> Result<Paged<T>, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::request(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("limit must be between 1 and {MAX_LIMIT}, not {limit}"),
        ));
    }
    let start = match &q.after {
        None => 0,
        Some(after) => {
            items.iter().position(|i| key(i) == after).ok_or_else(|| {
                ApiError::request(
                    StatusCode::BAD_REQUEST,
                    "invalid_query",
                    format!("the cursor after={after:?} names no item of this list"),
                )
            })? + 1
        }
    };
    let total = items.len();
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(total);
    let page: Vec<T> = items.into_iter().skip(start).take(end - start).collect();
    let next = match page.last() {
        Some(last) if end < total => {
            let mut query = String::new();
            for (k, v) in extra {
                query.push_str(&format!("{k}={}&", encode(v)));
            }
            query.push_str(&format!("limit={limit}&after={}", encode(key(last))));
            Some(format!("{path}?{query}"))
        }
        _ => None,
    };
    Ok(Paged { items: page, next })
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(limit: Option<u32>, after: Option<&str>) -> PageQuery {
        PageQuery {
            limit,
            after: after.map(str::to_owned),
        }
    }

    #[test]
    fn pages_walk_the_list_once_and_stop() {
        let items: Vec<String> = (0..5).map(|i| format!("k {i}")).collect();
        let p = paginate(
            items.clone(),
            String::as_str,
            &q(Some(2), None),
            "/v1/x",
            &[],
        );
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.items, ["k 0", "k 1"]);
        assert_eq!(p.next.as_deref(), Some("/v1/x?limit=2&after=k%201"));
        let p = paginate(
            items.clone(),
            String::as_str,
            &q(Some(2), Some("k 3")),
            "/v1/x",
            &[],
        );
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.items, ["k 4"]);
        assert!(p.next.is_none());
        // Exactly a page left: no next link to an empty page.
        let p = paginate(
            items.clone(),
            String::as_str,
            &q(Some(2), Some("k 2")),
            "/v1/x",
            &[],
        );
        assert!(p.unwrap_or_else(|e| panic!("{e}")).next.is_none());
    }

    #[test]
    fn a_limit_out_of_bounds_or_an_unknown_cursor_is_refused() {
        let items = vec!["a".to_owned()];
        for bad in [
            q(Some(0), None),
            q(Some(MAX_LIMIT + 1), None),
            q(None, Some("zz")),
        ] {
            let e = paginate(items.clone(), String::as_str, &bad, "/v1/x", &[]);
            let Err(e) = e else {
                panic!("accepted {bad:?}")
            };
            assert_eq!(e.classify().0, StatusCode::BAD_REQUEST);
        }
    }
}
