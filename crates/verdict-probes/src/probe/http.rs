//! `http` probe: one request, judged on status, headers, body text and CEL over a JSON body.
//!
//! Requests go out over HTTP/1.1 and never through a proxy: a probe observes the system it
//! names. Every request opens its own connection (the clients keep none idle), so each sample
//! of a hold or converge shows whether the server accepts connections now, not whether one it
//! accepted earlier is still open. Redirects are observations unless `follow_redirects` is
//! set; then at most [`MAX_REDIRECTS`] are followed, and only within the origin (scheme, host
//! and port) of the probe's URL, since the spec's headers and body go with every hop. A
//! response whose body carries a content or transfer coding is an error: verdict asks for none
//! and judges bodies as received.

use super::net::{CapturingVerifier, TlsSettings, certificate_refusal, client_config};
use super::{
    FieldError, Judged, OutputInfo, ProbeDefaults, ProbeEnv, Sample, facts, positive_cap,
    positive_timeout, snapshot_of,
};
use crate::cel_expect::Expect;
use crate::output::Captured;
use crate::spec::{HttpProbe, StatusExpect, TlsOptions, Unreachable};
use crate::text_match::TextMatcher;
use bytes::Bytes;
use http::header::{
    CONNECTION, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION,
    TRANSFER_ENCODING,
};
use http::{Method, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use verdict_core::digest::RawHasher;

/// The client type: HTTP/1.1 over TCP or TLS, one connection per request.
pub type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How many redirects `follow_redirects` follows.
pub const MAX_REDIRECTS: usize = 10;

/// HTTP clients shared by every probe of a run, one per TLS setting. They share the TLS
/// configuration only: no connection outlives its request.
#[derive(Debug, Default)]
pub struct Clients {
    map: Mutex<HashMap<TlsSettings, HttpClient>>,
}

impl Clients {
    /// The client for `tls`, built on first use.
    pub fn get(&self, tls: &TlsSettings) -> Result<HttpClient, String> {
        if let Ok(map) = self.map.lock()
            && let Some(c) = map.get(tls)
        {
            return Ok(c.clone());
        }
        let config = client_config(CapturingVerifier::new(tls)?)?;
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        // No idle connections: a sample answered over a connection opened for an earlier one
        // would pass while the server refuses new connections.
        let client: HttpClient = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        if let Ok(mut map) = self.map.lock() {
            map.insert(tls.clone(), client.clone());
        }
        Ok(client)
    }
}

/// An error and its causes, on one line.
#[must_use]
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if parts.last().is_none_or(|p| !p.contains(&s)) {
            parts.push(s);
        }
        cur = c.source();
    }
    parts.join(": ")
}

/// TLS settings from spec options.
#[must_use]
pub fn settings(o: Option<&TlsOptions>) -> TlsSettings {
    TlsSettings {
        ca: o.and_then(|o| o.ca.clone()),
        insecure: o.and_then(|o| o.insecure).unwrap_or(false),
    }
}

/// A response, read with a cap.
#[derive(Debug)]
pub struct Fetched {
    /// Status code.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Captured,
    /// The URL that gave this response (the request's unless a redirect was followed).
    pub url: Uri,
    /// How many redirects were followed to get here.
    pub redirects: usize,
    /// Why the body cannot be judged as sent (it carries a content coding), if it cannot: only
    /// what reads the body refuses it, so a probe of the status alone still judges.
    pub coded: Option<String>,
}

/// Why a request did not produce a response.
#[derive(Debug)]
pub enum FetchError {
    /// The server's certificate was refused: a finding about the server.
    Certificate(String),
    /// No connection to the server could be made: it could not be reached.
    Unreachable(String),
    /// Anything else: could not observe.
    Other(String),
}

fn classify(e: &(dyn std::error::Error + 'static)) -> FetchError {
    match certificate_refusal(e) {
        Some(why) => FetchError::Certificate(why),
        None => FetchError::Other(chain(e)),
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Method.
    pub method: &'a Method,
    /// Absolute URI.
    pub uri: &'a Uri,
    /// Headers.
    pub headers: &'a HeaderMap,
    /// Body.
    pub body: &'a Bytes,
    /// Follow up to [`MAX_REDIRECTS`] redirects within the origin of `uri`.
    pub follow_redirects: bool,
}

/// Sends a request (following redirects within its origin if asked) and reads the body with a
/// cap.
pub async fn fetch(client: &HttpClient, r: Request<'_>, cap: u64) -> Result<Fetched, FetchError> {
    let start = url_of(r.uri)?;
    let mut method = r.method.clone();
    let mut uri = r.uri.clone();
    let mut body = r.body.clone();
    let mut headers = r.headers.clone();
    // The connection is not reused, and saying so lets the server close it first (and keep the
    // closed connection's state on its side rather than the prober's).
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    let mut redirects = 0;
    loop {
        let mut req = http::Request::new(Full::new(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = uri.clone();
        *req.headers_mut() = headers.clone();
        let resp = client.request(req).await.map_err(|e| match classify(&e) {
            FetchError::Other(why) if e.is_connect() => FetchError::Unreachable(why),
            other => other,
        })?;
        let status = resp.status();
        if r.follow_redirects
            && status.is_redirection()
            && let Some(location) = resp.headers().get(LOCATION)
        {
            uri = redirect_target(&start, &uri, location, redirects)?;
            redirects += 1;
            if status == http::StatusCode::SEE_OTHER {
                method = Method::GET;
                body = Bytes::new();
            }
            continue;
        }
        let coded = uncoded(resp.headers()).err();
        let (parts, mut incoming) = resp.into_parts();
        let cap_usize = usize::try_from(cap).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        let mut hasher = RawHasher::new();
        let mut total: u64 = 0;
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| classify(&e))?;
            if let Ok(chunk) = frame.into_data() {
                hasher.update(&chunk);
                total += chunk.len() as u64;
                let room = cap_usize.saturating_sub(bytes.len());
                bytes.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            }
        }
        return Ok(Fetched {
            status: status.as_u16(),
            headers: parts.headers,
            body: Captured {
                bytes,
                total,
                digest: hasher.finish(),
                overflow: total > cap,
            },
            url: uri,
            redirects,
            coded,
        });
    }
}

fn url_of(uri: &Uri) -> Result<url::Url, FetchError> {
    url::Url::parse(&uri.to_string())
        .map_err(|e| FetchError::Other(format!("invalid url {uri}: {e}")))
}

/// Where a redirect leads, when it may be followed: resolved against the URI that answered it
/// and within the origin of `start`. The spec's headers (credentials among them) and body go
/// with every hop, and the answer at the end is judged as the system's, so a hop to another
/// origin, a downgrade to plain HTTP among them, ends the observation instead.
fn redirect_target(
    start: &url::Url,
    from: &Uri,
    location: &HeaderValue,
    followed: usize,
) -> Result<Uri, FetchError> {
    let text = location
        .to_str()
        .map_err(|_| FetchError::Other("redirect whose Location is not text".into()))?;
    if followed >= MAX_REDIRECTS {
        return Err(FetchError::Other(format!(
            "more than {MAX_REDIRECTS} redirects (the last to {text:?})"
        )));
    }
    let next = url_of(from)?
        .join(text)
        .map_err(|e| FetchError::Other(format!("redirect to {text:?} cannot be followed: {e}")))?;
    if next.origin() != start.origin() {
        let how = if start.scheme() == "https" && next.scheme() == "http" {
            "downgrades https to http"
        } else {
            "leaves the url's origin"
        };
        return Err(FetchError::Other(format!(
            "redirect to {text:?} {how}: only redirects within {} are followed",
            start.origin().ascii_serialization()
        )));
    }
    next.as_str()
        .parse()
        .map_err(|e| FetchError::Other(format!("redirect to {text:?} cannot be followed: {e}")))
}

/// Refuses a response whose body is encoded: no Accept-Encoding is sent, and the client decodes
/// only `chunked`, so an encoded body would be judged as the bytes of its coding (a gzip'd
/// error page passes `not_matches: error`).
fn uncoded(headers: &HeaderMap) -> Result<(), String> {
    for (field, decoded) in [
        (CONTENT_ENCODING, "identity"),
        (TRANSFER_ENCODING, "chunked"),
    ] {
        for value in headers.get_all(&field) {
            let text = value
                .to_str()
                .map_err(|_| format!("the answer's {} is not text", field.as_str()))?;
            let coding = text.split(',').map(str::trim).find(|c| {
                !c.is_empty()
                    && !c.eq_ignore_ascii_case(decoded)
                    && !c.eq_ignore_ascii_case("identity")
            });
            if let Some(coding) = coding {
                return Err(format!(
                    "the answer's body is encoded ({}: {coding}); only bodies without a coding are judged",
                    field.as_str()
                ));
            }
        }
    }
    Ok(())
}

/// A response field as one value: every line of it, in order, joined with ", " (RFC 9110
/// section 5.3), so that an expectation sees what a line it was not written for says too.
/// `None` when the field is absent; `Err` when a line is not text.
fn field_value(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, ()> {
    let mut lines = headers.get_all(name).iter().peekable();
    if lines.peek().is_none() {
        return Ok(None);
    }
    let texts = lines
        .map(|v| v.to_str().map_err(|_| ()))
        .collect::<Result<Vec<_>, ()>>()?;
    Ok(Some(texts.join(", ")))
}

/// The body as text for a text expectation: only UTF-8 is read, and a body declared in another
/// charset, or not valid UTF-8, is an error, since read as UTF-8 (or with its bad bytes
/// replaced) it would not say what it says (UTF-16 `error` does not match `error`).
fn body_text(r: &Fetched) -> Result<&str, Judged> {
    for line in r.headers.get_all(CONTENT_TYPE) {
        let text = line
            .to_str()
            .map_err(|_| Judged::Error("the answer's content-type is not text".into()))?;
        for param in text.split(';').skip(1) {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            if !name.trim().eq_ignore_ascii_case("charset") {
                continue;
            }
            let value = value.trim();
            let charset = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            if !charset.eq_ignore_ascii_case("utf-8") && !charset.eq_ignore_ascii_case("us-ascii") {
                return Err(Judged::Error(format!(
                    "the body's charset is {charset:?}; text expectations read only utf-8"
                )));
            }
        }
    }
    (r.body.strict_text())
        .map_err(|e| Judged::Error(format!("the body {e}; text expectations read only UTF-8")))
}

/// Parses request headers, naming the bad one.
pub fn header_map(h: Option<&BTreeMap<String, String>>, at: &str) -> Result<HeaderMap, FieldError> {
    let mut map = HeaderMap::new();
    for (k, v) in h.into_iter().flatten() {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            FieldError::new(
                format!("{at}/{}", crate::positions::token(k)),
                format!("invalid header name {k:?}"),
            )
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            FieldError::new(
                format!("{at}/{}", crate::positions::token(k)),
                format!("invalid value for header {k:?}"),
            )
        })?;
        // Names ignore case: `Authorization` and `authorization` would send one, the other
        // silently dropped while both stay in the definition.
        if map.contains_key(&name) {
            return Err(FieldError::new(
                format!("{at}/{}", crate::positions::token(k)),
                format!("header {k:?} is given twice (header names ignore case)"),
            ));
        }
        map.insert(name, value);
    }
    Ok(map)
}

/// Parses and checks a probe URL (http or https with a host).
pub fn parse_url(u: &str, at: &str) -> Result<Uri, FieldError> {
    let url =
        url::Url::parse(u).map_err(|e| FieldError::new(at, format!("invalid url {u:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(FieldError::new(
            at,
            format!("url {u:?} must be http or https with a host"),
        ));
    }
    url.as_str()
        .parse()
        .map_err(|e| FieldError::new(at, format!("invalid url {u:?}: {e}")))
}

/// A compiled `http` probe.
#[derive(Debug)]
pub struct HttpCheck {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    request_body: Bytes,
    status: StatusExpect,
    response_headers: Vec<(HeaderName, TextMatcher)>,
    body: Option<TextMatcher>,
    expect: Option<Expect>,
    tls: TlsSettings,
    follow: bool,
    cap: u64,
    pub(crate) timeout: Duration,
    pub(crate) unreachable: Unreachable,
}

impl HttpCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: HttpProbe, d: &ProbeDefaults) -> Result<(HttpProbe, Self), FieldError> {
        let uri = parse_url(&p.url, "/url")?;
        let method_text = p
            .method
            .clone()
            .unwrap_or_else(|| "GET".into())
            .to_ascii_uppercase();
        let method = Method::from_bytes(method_text.as_bytes())
            .map_err(|_| FieldError::new("/method", format!("invalid method {method_text:?}")))?;
        p.method = Some(method_text);
        let headers = header_map(p.headers.as_ref(), "/headers")?;
        let mut response_headers = Vec::new();
        for (k, m) in p.response_headers.iter().flatten() {
            let at = format!("/response_headers/{}", crate::positions::token(k));
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| FieldError::new(&at, format!("invalid header name {k:?}")))?;
            response_headers.push((
                name,
                TextMatcher::compile(m).map_err(|e| FieldError::new(&at, e))?,
            ));
        }
        let body = p
            .body
            .as_ref()
            .map(TextMatcher::compile)
            .transpose()
            .map_err(|m| FieldError::new("/body", m))?;
        let expect = p
            .expect
            .as_deref()
            .map(Expect::compile)
            .transpose()
            .map_err(|m| FieldError::new("/expect", m))?;
        // A HEAD answer has no body, so a body expectation would pass having judged nothing.
        if method == Method::HEAD {
            for (field, given) in [("body", body.is_some()), ("expect", expect.is_some())] {
                if given {
                    return Err(FieldError::new(
                        format!("/{field}"),
                        format!(
                            "`{field}` has no effect with method HEAD, whose answer has no body"
                        ),
                    ));
                }
            }
        }
        let status = p.status.clone().unwrap_or(StatusExpect::Class(2));
        p.status = Some(status.clone());
        let follow = p.follow_redirects.unwrap_or(false);
        p.follow_redirects = Some(follow);
        let tls = settings(p.tls.as_ref());
        if uri.scheme_str() == Some("https") || p.tls.is_some() {
            p.tls = Some(TlsOptions {
                ca: tls.ca.clone(),
                insecure: Some(tls.insecure),
            });
        }
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let unreachable = super::unreachable_setting(&mut p.unreachable);
        let cap = positive_cap(p.max_output, d)?;
        p.max_output = Some(cap);
        let request_body = Bytes::from(p.request_body.clone().unwrap_or_default());
        Ok((
            p,
            Self {
                method,
                uri,
                headers,
                request_body,
                status,
                response_headers,
                body,
                expect,
                tls,
                follow,
                cap,
                timeout: timeout.std(),
                unreachable,
            },
        ))
    }

    pub(crate) async fn observe(&self, env: &ProbeEnv, judge: bool) -> Sample {
        let client = match env.http.get(&self.tls) {
            Ok(c) => c,
            Err(e) => return Sample::error(e),
        };
        let req = Request {
            method: &self.method,
            uri: &self.uri,
            headers: &self.headers,
            body: &self.request_body,
            follow_redirects: self.follow,
        };
        let fetched = match fetch(&client, req, self.cap).await {
            Ok(f) => f,
            Err(FetchError::Certificate(why)) => {
                return Sample::observed(facts([("tls", Value::String(why.clone()))]), None)
                    .judged(Err(Judged::Fail(why)));
            }
            Err(FetchError::Unreachable(e)) => return Sample::unreachable(e),
            Err(FetchError::Other(e)) => return Sample::error(e),
        };
        let mut f = facts([("status", Value::from(fetched.status))]);
        if fetched.redirects > 0 {
            f.insert("redirects".into(), Value::from(fetched.redirects));
            f.insert("final_url".into(), Value::String(fetched.url.to_string()));
        }
        if !self.response_headers.is_empty() {
            let mut seen_headers = serde_json::Map::new();
            for (name, _) in &self.response_headers {
                let v = field_value(&fetched.headers, name).ok().flatten();
                seen_headers.insert(
                    name.as_str().to_owned(),
                    v.map_or(Value::Null, Value::String),
                );
            }
            f.insert("headers".into(), Value::Object(seen_headers));
        }
        let mut sample = Sample::observed(f, Some(OutputInfo::of(&fetched.body)));
        if !judge {
            if let Some(why) = &fetched.coded {
                return sample.judged(Err(Judged::Error(why.clone())));
            }
            if fetched.body.overflow {
                return sample.judged(Err(Judged::Error(format!(
                    "body exceeds {} bytes",
                    self.cap
                ))));
            }
            let body = match snapshot_of(&fetched.body.bytes, "body") {
                Ok(v) => v,
                Err(j) => return sample.judged(Err(j)),
            };
            sample.snapshot = Some(json!({"status": fetched.status, "body": body}));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = match (self.judge(&fetched), &self.expect) {
            (Ok(why), Some(e)) => super::expect_json(e, &fetched.body.bytes, "body")
                .await
                .map(|()| why),
            (verdict, _) => verdict,
        };
        sample.judged(verdict)
    }

    fn judge(&self, r: &Fetched) -> Result<String, Judged> {
        if !self.status.accepts(r.status) {
            return Err(Judged::Fail(format!(
                "status {} (expected {})",
                r.status, self.status
            )));
        }
        for (name, m) in &self.response_headers {
            let text = field_value(&r.headers, name)
                .map_err(|()| Judged::Fail(format!("header {} is not text", name.as_str())))?
                .ok_or_else(|| Judged::Fail(format!("header {} missing", name.as_str())))?;
            m.check(&format!("header {}", name.as_str()), &text)
                .map_err(Judged::Fail)?;
        }
        let needs_body = self.body.is_some() || self.expect.is_some();
        if needs_body && let Some(why) = &r.coded {
            return Err(Judged::Error(why.clone()));
        }
        if needs_body && r.body.overflow {
            return Err(Judged::Error(format!("body exceeds {} bytes", self.cap)));
        }
        if let Some(m) = &self.body {
            m.check("body", body_text(r)?).map_err(Judged::Fail)?;
        }
        // `expect` is judged last, by the caller.
        Ok(format!("status {}", r.status))
    }
}
