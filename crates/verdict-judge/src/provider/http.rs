//! The HTTP exchange shared by the HTTP providers: one POST of a JSON body, bounded reads, and
//! a strict parse of the answer.

use super::CallFailure;
use crate::secret::{Secret, redact_all, redact_then_cut};
use reqwest::Url;
use serde_json::Value;
use std::sync::OnceLock;

/// The largest response body read; a provider that sends more is refused.
const MAX_BODY: usize = 8 * 1024 * 1024;
/// How much of an error body is kept as detail.
const ERROR_EXCERPT: usize = 512;

/// The client an HTTP provider at `base_url` uses: rustls, no cookies, no redirects (an API
/// endpoint that redirects is a misconfiguration, and a redirect could carry the key
/// elsewhere). A plain-http endpoint (a model server on this machine) is never reached through
/// a proxy the environment names, which would receive the key in clear; https may tunnel.
/// `base_url` must be an http or https URL with a host, and a provider that `sends_key` is
/// refused plain http to any host but the loopback ([`plain_http_refusal`]).
///
/// One client of each of the two kinds is built per process and shared by every provider:
/// building one reads and parses the system's whole trust store, milliseconds of work that a
/// verifier would otherwise repeat for every run. Sharing carries nothing from one provider to
/// another but open connections to the same endpoint: the client keeps no cookies and holds no
/// key (each request carries its own headers).
pub(crate) fn client(base_url: &str, sends_key: bool) -> Result<reqwest::Client, String> {
    static TLS: OnceLock<reqwest::Client> = OnceLock::new();
    static PLAIN: OnceLock<reqwest::Client> = OnceLock::new();
    let https = uses_tls(base_url, sends_key)?;
    let shared = if https { &TLS } else { &PLAIN };
    if let Some(client) = shared.get() {
        return Ok(client.clone());
    }
    let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    let builder = if https { builder } else { builder.no_proxy() };
    let built = builder.build().map_err(|e| e.to_string())?;
    Ok(shared.get_or_init(|| built).clone())
}

/// Whether `base_url` is https (true) or plain http (false), by its parsed scheme, which the
/// URL parser reads in any case (`HTTPS://` is https); refused when it is neither, names no
/// host, or would carry a key in clear to another machine.
fn uses_tls(base_url: &str, sends_key: bool) -> Result<bool, String> {
    let url = Url::parse(base_url).map_err(|e| format!("base_url {base_url:?}: {e}"))?;
    if url.host().is_none() {
        return Err(format!("base_url {base_url:?} names no host"));
    }
    match url.scheme() {
        "https" => Ok(true),
        "http" => match plain_http_refusal(&url).filter(|_| sends_key) {
            Some(why) => Err(format!("base_url {base_url:?}: {why}")),
            None => Ok(false),
        },
        other => Err(format!(
            "base_url {base_url:?}: the scheme must be http or https, not {other:?}"
        )),
    }
}

/// Why an API key must not be sent to `url`, or `None` when it may: over plain http a key is
/// readable by every network it crosses, so plain http is accepted for a provider that sends
/// one only to this machine's loopback ([`is_loopback`]).
pub(crate) fn plain_http_refusal(url: &Url) -> Option<String> {
    (url.scheme() == "http" && !is_loopback(url)).then(|| {
        format!(
            "plain http would send the API key unencrypted to {}; use https for any host other than the loopback (127.0.0.0/8, ::1, localhost)",
            url.host_str().unwrap_or("no host")
        )
    })
}

/// Whether `url` names this machine's loopback ([`verdict_core::loopback::is_loopback_host`]:
/// the rule the server's client and its webhooks apply too).
fn is_loopback(url: &Url) -> bool {
    url.host_str()
        .is_some_and(verdict_core::loopback::is_loopback_host)
}

async fn read_bounded(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(format!("response body larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// POSTs `body` to `url` and returns the strictly parsed JSON answer of a 2xx response, with
/// the length of the body it was read from (what the response's padding is measured against).
///
/// There is no timer here: the run loop's deadline is the only one, so a reply that runs it
/// out is classified by that deadline (a timeout), never by a second timer of the same length
/// that might fire first and make it look like a transport error.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
    secrets: &[&Secret],
) -> Result<(Value, usize), CallFailure> {
    let clean = |s: String| redact_all(&s, secrets.iter().copied());
    let mut req = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut resp = req
        .send()
        .await
        .map_err(|e| CallFailure::Transport(clean(error_chain(&e))))?;
    let status = resp.status();
    if !status.is_success() {
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = read_bounded(&mut resp, 64 * 1024).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        return Err(CallFailure::Status {
            status: status.as_u16(),
            retry_after,
            // Redacted whole, then cut: a key echoed across the cut leaves no run behind.
            detail: redact_then_cut(text.trim(), secrets.iter().copied(), ERROR_EXCERPT),
        });
    }
    let body = read_bounded(&mut resp, MAX_BODY)
        .await
        .map_err(|e| CallFailure::Transport(clean(e)))?;
    let value = verdict_core::json::parse(&body)
        .map_err(|e| CallFailure::Protocol(clean(format!("response is not strict JSON: {e}"))))?;
    Ok((value, body.len()))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// A non-negative integer field of a JSON object.
pub(crate) fn uint(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

/// A string field of a JSON object.
pub(crate) fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_read_from_the_parsed_url_in_any_case() {
        assert_eq!(uses_tls("HTTPS://api.example/v1", true), Ok(true));
        assert_eq!(uses_tls("Https://api.example/v1", false), Ok(true));
        assert_eq!(uses_tls("HTTP://127.0.0.1:8000/v1", true), Ok(false));
        for bad in [
            "ftp://api.example/v1",
            "file:///etc/passwd",
            "no url",
            "https://",
        ] {
            assert!(uses_tls(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_key_goes_over_plain_http_only_to_the_loopback() {
        for ok in [
            "http://127.0.0.1:8000/v1",
            "http://127.1.2.3/",
            "http://127.1/",
            "http://[::1]:9/",
            "http://localhost:11434/v1",
            "http://LocalHost/",
            "HTTP://127.0.0.1/",
            "https://api.example/v1",
            "https://192.0.2.7/v1",
        ] {
            assert!(uses_tls(ok, true).is_ok(), "{ok}");
        }
        for bad in [
            "http://192.0.2.7:8000/v1",
            "HTTP://192.0.2.7/v1",
            "http://10.0.0.1/",
            "http://0.0.0.0/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://localhost./",
            "http://localhost.evil.example/",
            "http://models.localhost/",
            "http://127.0.0.1.nip.io/",
            "http://models.internal/v1",
        ] {
            let err = uses_tls(bad, true).unwrap_err();
            assert!(
                err.contains("unencrypted") && err.contains(&format!("{bad:?}")),
                "{bad}: {err}"
            );
            // Without a key there is nothing to expose: a server without authentication.
            assert_eq!(uses_tls(bad, false), Ok(false), "{bad}");
        }
    }
}
