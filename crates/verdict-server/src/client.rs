//! A client of this API, for `verdict --server URL`: the command line sends a lifecycle
//! command to a running server instead of opening the store, with the caller's token as the
//! bearer. Bodies and answers are the route's own types (and the engine's views, which routes
//! return as they are), so what a command reads back is what the local use case returns. A
//! refusal comes back as the problem document (RFC 9457) it was sent as.

use crate::problem::Problem;
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// How long one request may take, connecting included. An audit walk or a gate run over a
/// large execution is the slowest thing a route does.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a call did not return the route's answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server's URL is unusable.
    #[error("server URL {url:?}: {why}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// No answer: the server could not be reached, or did not answer in time.
    #[error("cannot reach the server at {base}: {detail}")]
    Unreachable {
        /// The server.
        base: String,
        /// What the connection reported, with its causes.
        detail: String,
    },
    /// The server refused, with a problem document.
    #[error(
        "{}: {} (HTTP {} from {method} {path}){}",
        problem.code,
        problem.detail,
        problem.status,
        if problem.retryable { "; retrying may succeed" } else { "" }
    )]
    Refused {
        /// The route's method.
        method: Method,
        /// The route's path.
        path: String,
        /// What the server sent.
        problem: Box<Problem>,
    },
    /// The server answered with something this client does not read: a failure without a
    /// problem document, or a success of another shape.
    #[error(
        "HTTP {status} from {method} {url}: the answer is not what this verdict expects ({why}): {excerpt}"
    )]
    Unexpected {
        /// The route's method.
        method: Method,
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What did not read.
        why: String,
        /// At most 200 characters of the answer.
        excerpt: String,
    },
}

impl ClientError {
    /// The reason code of a refusal, if the server sent one.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Refused { problem, .. } => Some(&problem.code),
            _ => None,
        }
    }
}

/// A server to talk to, and the caller's token.
#[derive(Debug, Clone)]
pub struct Client {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// A client of the server at `url` (`http://` or `https://`, no credentials in it),
    /// sending `token` as the bearer when there is one.
    pub fn new(url: &str, token: Option<String>) -> Result<Self, ClientError> {
        let bad = |why: String| ClientError::BadUrl {
            url: url.to_owned(),
            why,
        };
        let mut base: Url = url.parse().map_err(|e| bad(format!("not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad(format!(
                "the scheme must be http or https, not {:?}",
                base.scheme()
            )));
        }
        if base.scheme() == "http" && !is_loopback(&base) {
            return Err(bad(format!(
                "plain http:// would send the bearer token unencrypted to {}; use https:// for any host other than the loopback (127.0.0.0/8, ::1, localhost)",
                base.host_str().unwrap_or("no host")
            )));
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(bad(
                "it must not carry credentials; the token goes as the bearer".into(),
            ));
        }
        // Routes are joined onto the base, so it names a directory.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let mut builder = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if base.scheme() == "http" {
            // Plain http is allowed only because it never leaves the machine; a proxy named by
            // the environment would carry the bearer token off it in clear.
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|e| bad(format!("no HTTP client for it: {e}")))?;
        Ok(Self { base, token, http })
    }

    /// `GET path` (relative: `v1/...`).
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send::<(), T>(Method::GET, path, None).await
    }

    /// Every item of a paginated list route (`path` relative, its query included or not),
    /// following each page's `next` link until the list is exhausted.
    pub async fn get_all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, ClientError> {
        let mut items = Vec::new();
        let mut next = Some(path.to_owned());
        while let Some(path) = next.take() {
            let page: Page<T> = self.get(path.trim_start_matches('/')).await?;
            if page.items.is_empty() && page.next.is_some() {
                // A list that never ends would hold the command forever.
                return Err(ClientError::Unexpected {
                    method: Method::GET,
                    url: format!("{}{}", self.base, path.trim_start_matches('/')),
                    status: 200,
                    why: "an empty page that links to another".into(),
                    excerpt: String::new(),
                });
            }
            items.extend(page.items);
            next = page.next;
        }
        Ok(items)
    }

    /// `POST path` with `body` as JSON.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(Method::POST, path, Some(body)).await
    }

    /// `POST path` with no body.
    pub async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send::<(), T>(Method::POST, path, None).await
    }

    /// `PUT path` with `body` as JSON.
    pub async fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(Method::PUT, path, Some(body)).await
    }

    /// `PUT path` with `bytes` as the body and `media_type` as its `Content-Type`: a blob.
    /// Without a media type none is sent, so none is kept, as on a store opened here.
    pub async fn put_bytes<T: DeserializeOwned>(
        &self,
        path: &str,
        bytes: Vec<u8>,
        media_type: Option<&str>,
    ) -> Result<T, ClientError> {
        let (status, url, answer) = self
            .exchange(Method::PUT, path, Some((bytes, media_type)))
            .await?;
        decode(&Method::PUT, &url, status, &answer)
    }

    /// `GET path`, the answer's bytes as they are (a blob, a JUnit report).
    pub async fn get_bytes(&self, path: &str) -> Result<Vec<u8>, ClientError> {
        let (_, _, answer) = self.exchange(Method::GET, path, None).await?;
        Ok(answer)
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let body = match body {
            None => None,
            Some(body) => Some((
                serde_json::to_vec(body).map_err(|e| ClientError::BadUrl {
                    url: format!("{}{path}", self.base),
                    why: format!("the body does not serialise: {e}"),
                })?,
                Some("application/json"),
            )),
        };
        let (status, url, answer) = self.exchange(method.clone(), path, body).await?;
        decode(&method, &url, status, &answer)
    }

    /// Sends one request; a success's status, URL and bytes, or the refusal it was.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, Option<&str>)>,
    ) -> Result<(u16, Url, Vec<u8>), ClientError> {
        let url = self.base.join(path).map_err(|e| ClientError::BadUrl {
            url: format!("{}{path}", self.base),
            why: e.to_string(),
        })?;
        let mut req = self.http.request(method.clone(), url.clone());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some((bytes, media)) = body {
            if let Some(media) = media {
                req = req.header(reqwest::header::CONTENT_TYPE, media);
            }
            req = req.body(bytes);
        }
        let unreachable = |e: &reqwest::Error| ClientError::Unreachable {
            base: self.base.to_string(),
            detail: error_chain(e),
        };
        let resp = req.send().await.map_err(|e| unreachable(&e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| unreachable(&e))?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<Problem>(&bytes) {
                Ok(problem) => ClientError::Refused {
                    method,
                    path: url.path().to_owned(),
                    problem: Box::new(problem),
                },
                Err(e) => ClientError::Unexpected {
                    method,
                    url: url.to_string(),
                    status: status.as_u16(),
                    why: format!("no problem document: {e}"),
                    excerpt: excerpt(&bytes),
                },
            });
        }
        Ok((status.as_u16(), url, bytes.to_vec()))
    }
}

/// A success's JSON answer as the route's type.
fn decode<T: DeserializeOwned>(
    method: &Method,
    url: &Url,
    status: u16,
    bytes: &[u8],
) -> Result<T, ClientError> {
    serde_json::from_slice(bytes).map_err(|e| ClientError::Unexpected {
        method: method.clone(),
        url: url.to_string(),
        status,
        why: e.to_string(),
        excerpt: excerpt(bytes),
    })
}

/// One page of a list route.
#[derive(serde::Deserialize)]
struct Page<T> {
    items: Vec<T>,
    next: Option<String>,
}

/// At most 200 characters of an answer, for an error message.
fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push_str("...");
    }
    cut
}

/// An error and its sources, one sentence: reqwest's own message alone says only "error
/// sending request".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// One path segment, percent-encoded, for a route's `{id}`.
#[must_use]
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `url` names this machine's loopback ([`verdict_core::loopback::is_loopback_host`]).
/// Only there may a token travel over plain HTTP, since it never leaves the machine.
fn is_loopback(url: &Url) -> bool {
    url.host_str()
        .is_some_and(verdict_core::loopback::is_loopback_host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_the_loopback() {
        for ok in [
            "http://127.0.0.1:8080/",
            "http://127.1.2.3/",
            "http://[::1]:9/",
            "http://localhost:18099/",
            "http://LOCALHOST/",
            "https://192.0.2.2:18099/",
            "https://verdict.example/",
        ] {
            assert!(Client::new(ok, Some("t".into())).is_ok(), "{ok}");
        }
        for bad in [
            "http://192.0.2.2:18099",
            "http://10.0.0.1/",
            "http://0.0.0.0/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::]/",
            "http://localhost.evil.example/",
            "http://127.0.0.1.nip.io/",
            "http://verdict.example/",
        ] {
            let Err(ClientError::BadUrl { url, why }) = Client::new(bad, None) else {
                panic!("{bad} accepted");
            };
            assert_eq!(url, bad);
            assert!(why.contains("https://"), "{why}");
        }
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("ex-1"), "ex-1");
        assert_eq!(segment("a/b c?"), "a%2Fb%20c%3F");
    }

    #[test]
    fn unusable_urls_are_refused() {
        for bad in ["not a url", "ftp://h/", "http://u:p@h/"] {
            assert!(
                matches!(Client::new(bad, None), Err(ClientError::BadUrl { .. })),
                "{bad}"
            );
        }
        assert!(Client::new("http://127.0.0.1:8080/api", None).is_ok());
    }
}
