//! The lifecycle commands over HTTP: `--server URL` (or `VERDICT_SERVER`) sends each command
//! to a running `verdict serve` instead of opening the store, with the token as a bearer.
//!
//! Thin on purpose: each command is one route, its body and answer are the server's own typed
//! shapes (and the engine's views, which the server returns as they are), and the caller renders
//! them exactly as it renders the local use case's. A refusal comes back as the server's problem
//! document (RFC 9457) and is reported with its reason code and HTTP status.

use anyhow::{Context, Result, bail};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;
use verdict_server::problem::Problem;

/// How long one request may take, connecting included. An audit walk or a gate run over a
/// large execution is the slowest thing a route does.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// A server to talk to, and the caller's token.
pub(crate) struct Remote {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    /// The server named by `--server`, or `None` to work on the store directly. `--server`
    /// with `--store`, or with `--now` (the server's store keeps its own time), is refused.
    pub(crate) fn from_common(common: &crate::lifecycle_cmd::Common) -> Result<Option<Self>> {
        let Some(server) = common.server.as_deref() else {
            return Ok(None);
        };
        if common.store.is_some() {
            bail!(
                "give --server (VERDICT_SERVER) or --store (VERDICT_STORE), not both: with --server the server's own store is used"
            );
        }
        if common.now.is_some() {
            bail!(
                "--now cannot be sent to a server (--server): the server's store takes every time from its own clock"
            );
        }
        let mut base: Url = server
            .parse()
            .with_context(|| format!("--server {server:?} is not a URL"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!(
                "--server {server:?}: the scheme must be http or https, not {:?}",
                base.scheme()
            );
        }
        if !base.username().is_empty() || base.password().is_some() {
            bail!(
                "--server must not carry credentials in its URL; give the token with --token or VERDICT_TOKEN"
            );
        }
        // Routes are joined onto the base, so it names a directory.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("cannot set up the HTTP client")?;
        Ok(Some(Self {
            base,
            token: common.token.clone(),
            http,
        }))
    }

    /// `GET path`.
    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send::<(), T>(Method::GET, path, None).await
    }

    /// `POST path` with `body` as JSON.
    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.send(Method::POST, path, Some(body)).await
    }

    /// `POST path` with no body.
    pub(crate) async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send::<(), T>(Method::POST, path, None).await
    }

    /// `PUT path` with `body` as JSON.
    pub(crate) async fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.send(Method::PUT, path, Some(body)).await
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T> {
        let url = self
            .base
            .join(path)
            .with_context(|| format!("{path:?} does not join onto {}", self.base))?;
        let mut req = self.http.request(method.clone(), url.clone());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(body)?);
        }
        let resp = req.send().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the server at {}: {}",
                self.base,
                error_chain(&e)
            )
        })?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .with_context(|| format!("{method} {url}: the answer ({status}) was cut off"))?;
        if !status.is_success() {
            return Err(refusal(&method, &url, status, &bytes));
        }
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{method} {url}: the server's answer ({status}) is not what this verdict expects: {}",
                excerpt(&bytes)
            )
        })
    }
}

/// A refusal as an error naming the reason code and the HTTP status: the problem document's
/// when the server sent one, else what it sent.
fn refusal(method: &Method, url: &Url, status: StatusCode, bytes: &[u8]) -> anyhow::Error {
    match serde_json::from_slice::<Problem>(bytes) {
        Ok(p) => anyhow::anyhow!(
            "{}: {} (HTTP {} from {method} {}{})",
            p.code,
            p.detail,
            p.status,
            url.path(),
            if p.retryable {
                "; retrying may succeed"
            } else {
                ""
            }
        ),
        Err(_) => anyhow::anyhow!(
            "HTTP {status} from {method} {url} without a problem document: {}",
            excerpt(bytes)
        ),
    }
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

/// One path segment, percent-encoded.
pub(crate) fn segment(s: &str) -> String {
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

/// Refuses a command that works only on a store opened here.
pub(crate) fn refuse_remote(common: &crate::lifecycle_cmd::Common, why: &str) -> Result<()> {
    if common.server.is_some() {
        bail!("this command cannot run against a server (--server / VERDICT_SERVER): {why}");
    }
    Ok(())
}
